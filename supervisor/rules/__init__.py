"""Policy rules: allow / ask / deny per call, with CEL conditions over the validated arguments.

A rule set is read from the ``[[rules]]`` tables of the team's ``policy.toml``
(:func:`~supervisor.rules.loader.load_rules`); :func:`~supervisor.rules.evaluate.evaluate`
decides one call (deny beats ask beats allow; with no rule matching, the tool's own classes
decide); :func:`~supervisor.rules.examples.check_examples` runs the examples rules carry
(``supervisor policy test FILE``).
"""
