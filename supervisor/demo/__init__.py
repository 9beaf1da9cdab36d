"""Demo tools and agents used by ``supervisor demo`` and the README."""
