"""Deterministic generator of the router relevance dataset (see README.md beside this file).

Run ``python tests/data/generate_toolbox_dataset.py`` to rewrite ``toolbox_tools.json`` and
``toolbox_queries.json``. No randomness beyond ``random.Random(SEED)``; no downloads.

Tools: 25 domains x 4 entities x 5 generic actions, plus hand-written domain-specific tools.
Queries: paraphrases assembled from a separate vocabulary of verbs and entity aliases (never the
tool's description), partial-word queries, and hand-written hard queries.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 20240611
HERE = Path(__file__).resolve().parent

# domain -> entities; entity = "singular|plural|aliases (comma)|field:type:description;..."
# type is "str", "int", "bool" or "a/b/c" (an enum).
DOMAINS: dict[str, list[str]] = {
    "crm": [
        "lead|leads|prospect,potential buyer|stage:new/contacted/qualified/lost:lifecycle stage;"
        "owner_email:str:sales rep who owns it",
        "contact|contacts|person,point of contact|company:str:employer name;phone:str:phone",
        "opportunity|opportunities|deal,sales deal|amount:int:expected value in cents;"
        "close_quarter:q1/q2/q3/q4:expected closing quarter",
        "account|accounts|company record,organisation|industry:str:industry sector;"
        "tier:free/pro/enterprise:subscription tier",
    ],
    "inventory": [
        "stock_item|stock_items|sku,product stock|sku:str:stock keeping unit;"
        "warehouse:london/new-york/tokyo:storage site",
        "warehouse|warehouses|depot,storage site|region:emea/amer/apac:region;capacity:int:pallets",
        "stock_transfer|stock_transfers|stock move,relocation|quantity:int:units moved;"
        "destination:str:target warehouse",
        "supplier|suppliers|vendor,manufacturer|country:str:supplier country;lead_days:int:lead",
    ],
    "billing": [
        "invoice|invoices|bill,statement|due_date:str:payment due date;currency:usd/eur/gbp:money",
        "payment|payments|charge,transaction|method:card/bank/wallet:how it was paid",
        "subscription|subscriptions|plan,recurring plan|interval:monthly/yearly:billing period",
        "credit_note|credit_notes|credit memo,refund note|reason:str:why credit was issued",
    ],
    "calendar": [
        "event|events|meeting,appointment|start_time:str:ISO start;location:str:room or link",
        "calendar|calendars|schedule,agenda|timezone:str:IANA zone;color:str:display colour",
        "reminder|reminders|alert,nudge|minutes_before:int:lead time in minutes",
        "room_booking|room_bookings|room reservation,meeting room|room:str:room name;"
        "attendees:int:head count",
    ],
    "email": [
        "message|messages|mail,email|subject:str:subject line;folder:inbox/sent/archive:folder",
        "draft|drafts|unsent mail,draft email|recipient:str:to address",
        "mail_filter|mail_filters|inbox rule,mail rule|pattern:str:text matched in sender",
        "mailing_list|mailing_lists|distribution list,group alias|owner:str:list owner",
    ],
    "github": [
        "pull_request|pull_requests|PR,merge request|base_branch:str:target branch;"
        "draft:bool:is a draft",
        "issue|issues|bug report,ticket|label:bug/feature/question:triage label",
        "repository|repositories|repo,codebase|visibility:public/private:who can see it",
        "release|releases|version tag,shipped version|tag:str:git tag",
    ],
    "files": [
        "file|files|document,upload|path:str:folder path;mime_type:str:media type",
        "folder|folders|directory,drive folder|parent_id:str:parent folder",
        "share_link|share_links|public link,sharing url|expires_days:int:link lifetime",
        "file_version|file_versions|revision,older copy|version_number:int:revision number",
    ],
    "analytics": [
        "dashboard|dashboards|report board,overview page|owner:str:dashboard owner",
        "metric|metrics|kpi,measure|aggregation:sum/avg/count/max:how values combine",
        "funnel|funnels|conversion path,step sequence|steps:int:number of steps",
        "segment|segments|cohort,audience|rule:str:membership rule",
    ],
    "hr": [
        "employee|employees|staff member,worker|department:str:team;start_date:str:hire date",
        "leave_request|leave_requests|time off,vacation request|"
        "leave_type:sick/annual/parental:kind",
        "job_posting|job_postings|vacancy,open role|location:str:office or remote",
        "performance_review|performance_reviews|appraisal,evaluation|rating:int:score 1-5",
    ],
    "shipping": [
        "shipment|shipments|parcel,delivery|carrier:dhl/ups/fedex:carrier;weight_kg:int:weight",
        "shipping_label|shipping_labels|postage label,waybill|format:pdf/zpl:printer format",
        "pickup|pickups|courier collection,collection slot|date:str:pickup day",
        "return_authorization|return_authorizations|RMA,return|reason:damaged/wrong/unwanted:why",
    ],
    "support": [
        "ticket|tickets|support case,customer complaint|priority:low/normal/urgent:urgency",
        "macro|macros|canned reply,saved response|body:str:reply text",
        "sla_policy|sla_policies|service level,response target|hours:int:target hours",
        "satisfaction_survey|satisfaction_surveys|csat,feedback survey|score:int:1-5 rating",
    ],
    "marketing": [
        "campaign|campaigns|promotion,marketing push|channel:email/social/ads:channel",
        "newsletter|newsletters|bulletin,mailshot|audience:str:segment name",
        "landing_page|landing_pages|microsite,signup page|slug:str:url path",
        "coupon|coupons|promo code,discount code|percent_off:int:discount percent",
    ],
    "ecommerce": [
        "order|orders|purchase,checkout|status:pending/paid/shipped/refunded:order state",
        "product|products|catalog item,listing|price:int:price in cents;category:str:category",
        "cart|carts|basket,shopping bag|customer_id:str:shopper",
        "review|reviews|product rating,customer review|stars:int:1-5 stars",
    ],
    "finance": [
        "expense|expenses|spend,reimbursement|category:travel/meals/software:expense type",
        "budget|budgets|spending plan,allocation|fiscal_year:int:fiscal year",
        "ledger_entry|ledger_entries|journal entry,bookkeeping line|debit:int:debit in cents",
        "vendor_bill|vendor_bills|payable,supplier invoice|due_date:str:due date",
    ],
    "devops": [
        "deployment|deployments|rollout,release to prod|environment:staging/production:target",
        "server|servers|host,vm|region:str:cloud region;size:small/medium/large:instance size",
        "alert_rule|alert_rules|monitor,paging rule|threshold:int:trigger threshold",
        "incident|incidents|outage,production issue|severity:sev1/sev2/sev3:impact",
    ],
    "database": [
        "table|tables|relation,data table|schema_name:str:schema",
        "backup|backups|snapshot,dump|retention_days:int:how long kept",
        "index|indexes|db index,lookup structure|column:str:indexed column",
        "replica|replicas|read replica,follower|lag_seconds:int:allowed lag",
    ],
    "chat": [
        "channel|channels|chat room,conversation|private:bool:invite only",
        "chat_message|chat_messages|post,chat line|text:str:message body",
        "reaction|reactions|emoji,emoji reaction|emoji:str:emoji name",
        "huddle|huddles|voice call,quick call|topic:str:call topic",
    ],
    "projects": [
        "task|tasks|to-do,work item|assignee:str:person;due_date:str:deadline",
        "project|projects|initiative,workstream|owner:str:lead person",
        "milestone|milestones|checkpoint,deliverable date|date:str:target date",
        "sprint|sprints|iteration,cycle|length_days:int:sprint length",
    ],
    "security": [
        "api_key|api_keys|token,access key|scope:read/write/admin:permission level",
        "user_role|user_roles|permission set,access role|role:viewer/editor/admin:role name",
        "audit_entry|audit_entries|access log,security log|actor:str:who acted",
        "mfa_device|mfa_devices|2fa device,authenticator|kind:totp/sms/webauthn:factor type",
    ],
    "legal": [
        "contract|contracts|agreement,msa|counterparty:str:other party;renewal_date:str:renewal",
        "nda|ndas|non-disclosure agreement,confidentiality agreement|party:str:signing party",
        "signature_request|signature_requests|e-signature,sign request|signer_email:str:signer",
        "policy_document|policy_documents|company policy,handbook page|version:int:revision",
    ],
    "travel": [
        "flight|flights|plane ticket,air booking|origin:str:from airport;"
        "destination:str:to airport",
        "hotel|hotels|hotel stay,lodging|city:str:city;nights:int:nights",
        "itinerary|itineraries|trip plan,travel plan|traveler:str:traveler name",
        "car_rental|car_rentals|rental car,hire car|pickup_city:str:city",
    ],
    "education": [
        "course|courses|class,training module|level:beginner/intermediate/advanced:difficulty",
        "enrollment|enrollments|registration,sign-up|student_id:str:student",
        "assignment|assignments|homework,coursework|due_date:str:deadline",
        "grade|grades|mark,score|points:int:points earned",
    ],
    "healthcare": [
        "patient|patients|client record,medical record|date_of_birth:str:birth date",
        "prescription|prescriptions|medication order,script|dosage:str:dose text",
        "lab_result|lab_results|test result,blood work|test_code:str:lab test code",
        "visit|visits|consultation,clinic visit|clinic:str:clinic name",
    ],
    "iot": [
        "device|devices|sensor,gadget|firmware:str:firmware version",
        "telemetry_stream|telemetry_streams|sensor feed,readings stream|interval_s:int:seconds",
        "firmware_update|firmware_updates|ota update,device update|channel:stable/beta:track",
        "geofence|geofences|virtual fence,zone boundary|radius_m:int:radius in metres",
    ],
    "social": [
        "post|posts|status update,social post|network:twitter/linkedin/instagram:network",
        "follower|followers|fan,subscriber|handle:str:account handle",
        "scheduled_post|scheduled_posts|queued post,timed post|publish_at:str:publish time",
        "mention|mentions|tag,brand mention|sentiment:positive/neutral/negative:tone",
    ],
}

# action -> (name pattern, description template, takes id, takes fields)
ACTIONS: dict[str, tuple[str, str, bool, bool]] = {
    "list": ("list_{plural}", "List {plural_h} in the {domain} system, newest first.", False, True),
    "get": (
        "get_{entity}",
        "Return a single {entity_h} with all of its details by id.",
        True,
        False,
    ),
    "create": ("create_{entity}", "Create a new {entity_h} record in {domain}.", False, True),
    "update": ("update_{entity}", "Change fields of an existing {entity_h}.", True, True),
    "delete": ("delete_{entity}", "Permanently delete one {entity_h}.", True, False),
}

# Paraphrase vocabulary for queries (deliberately not the description wording).
VERB_PARAPHRASES: dict[str, list[str]] = {
    "list": [
        "show me all the {plural_q}",
        "what {plural_q} do we have",
        "give me every {entity_q}",
        "enumerate {plural_q}",
        "overview of current {plural_q}",
    ],
    "get": [
        "pull up the {entity_q} with id 42",
        "details for {entity_q} abc-7",
        "look at one particular {entity_q}",
        "fetch {entity_q} 1234",
        "open {entity_q} #9",
    ],
    "create": [
        "add a {entity_q}",
        "set up a fresh {entity_q}",
        "register another {entity_q}",
        "make a {entity_q} for me",
        "new {entity_q} please",
    ],
    "update": [
        "edit the {entity_q}",
        "modify an existing {entity_q}",
        "tweak {entity_q} 88",
        "rename or adjust a {entity_q}",
        "change the {field_q} on a {entity_q}",
    ],
    "delete": [
        "remove the {entity_q}",
        "get rid of {entity_q} 17",
        "erase a {entity_q}",
        "wipe {entity_q} x-3 for good",
        "drop that {entity_q}",
    ],
}

# Hand-written domain-specific tools: (domain, name, description, params).
SPECIALS: list[tuple[str, str, str, list[tuple[str, str, str]]]] = [
    (
        "billing",
        "refund_payment",
        "Refund all or part of a captured payment to the payer.",
        [("payment_id", "str", "payment to refund"), ("amount", "int", "cents to return")],
    ),
    (
        "billing",
        "send_invoice_reminder",
        "Email the customer a reminder about an unpaid invoice.",
        [("invoice_id", "str", "overdue invoice")],
    ),
    (
        "github",
        "merge_pull_request",
        "Merge an approved pull request into its base branch.",
        [("pull_request_id", "int", "PR number"), ("method", "merge/squash/rebase", "merge style")],
    ),
    (
        "github",
        "request_code_review",
        "Ask reviewers to review a pull request.",
        [("pull_request_id", "int", "PR number"), ("reviewers", "str", "comma separated logins")],
    ),
    (
        "shipping",
        "track_shipment",
        "Return carrier tracking events and the estimated arrival.",
        [("tracking_number", "str", "carrier tracking code")],
    ),
    (
        "shipping",
        "quote_shipping_rate",
        "Estimate postage cost for a parcel between two places.",
        [("weight_kg", "int", "parcel weight"), ("to_country", "str", "destination country")],
    ),
    (
        "inventory",
        "reorder_stock",
        "Place a purchase order with the supplier when stock is low.",
        [("sku", "str", "stock keeping unit"), ("quantity", "int", "units to order")],
    ),
    (
        "inventory",
        "count_stock_on_hand",
        "Report units available for a SKU across warehouses.",
        [("sku", "str", "stock keeping unit")],
    ),
    (
        "calendar",
        "find_free_slot",
        "Find a time when all attendees are available.",
        [("attendees", "str", "comma separated emails"), ("duration_min", "int", "length")],
    ),
    (
        "email",
        "send_email",
        "Send an email message to one or more recipients.",
        [
            ("to", "str", "recipient addresses"),
            ("subject", "str", "subject"),
            ("body", "str", "text"),
        ],
    ),
    (
        "email",
        "forward_message",
        "Forward a received message to another address.",
        [("message_id", "str", "message"), ("to", "str", "new recipient")],
    ),
    (
        "hr",
        "approve_leave_request",
        "Approve an employee's pending time-off request.",
        [("leave_request_id", "str", "request")],
    ),
    (
        "hr",
        "run_payroll",
        "Run the monthly payroll and produce payslips for all staff.",
        [("month", "str", "YYYY-MM")],
    ),
    (
        "analytics",
        "run_sql_report",
        "Run a saved analytics report and return its rows.",
        [("report_name", "str", "saved report")],
    ),
    (
        "analytics",
        "export_dashboard_csv",
        "Export a dashboard's data as a CSV file.",
        [("dashboard_id", "str", "dashboard")],
    ),
    (
        "support",
        "escalate_ticket",
        "Escalate a support ticket to the on-call tier-2 team.",
        [("ticket_id", "str", "ticket"), ("note", "str", "why it needs escalation")],
    ),
    (
        "support",
        "assign_ticket",
        "Assign a support ticket to an agent.",
        [("ticket_id", "str", "ticket"), ("agent_email", "str", "assignee")],
    ),
    (
        "devops",
        "rollback_deployment",
        "Roll back a deployment to the previous good version.",
        [("deployment_id", "str", "deployment")],
    ),
    ("devops", "restart_server", "Reboot a server instance.", [("server_id", "str", "host")]),
    (
        "devops",
        "acknowledge_incident",
        "Acknowledge an incident page so escalation stops.",
        [("incident_id", "str", "incident")],
    ),
    (
        "database",
        "run_query",
        "Execute a read-only SQL statement on the analytics replica.",
        [("statement_id", "str", "reviewed statement")],
    ),
    (
        "database",
        "restore_backup",
        "Restore a database from a backup snapshot.",
        [("backup_id", "str", "backup")],
    ),
    (
        "chat",
        "post_chat_message",
        "Post a message to a chat channel.",
        [("channel_id", "str", "channel"), ("text", "str", "message body")],
    ),
    (
        "chat",
        "invite_to_channel",
        "Invite a user into a chat channel.",
        [("channel_id", "str", "channel"), ("user", "str", "who")],
    ),
    (
        "security",
        "rotate_api_key",
        "Rotate an API key and revoke the old secret.",
        [("api_key_id", "str", "key")],
    ),
    (
        "security",
        "reset_user_password",
        "Send a password reset link to a user.",
        [("user_email", "str", "user")],
    ),
    (
        "legal",
        "send_for_signature",
        "Send a contract to the counterparty for e-signature.",
        [("contract_id", "str", "contract")],
    ),
    (
        "travel",
        "check_flight_status",
        "Return live departure and arrival status of a flight.",
        [("flight_number", "str", "e.g. BA117")],
    ),
    (
        "travel",
        "convert_currency",
        "Convert an amount between two currencies at today's rate.",
        [("amount", "int", "amount"), ("from_currency", "str", "ISO code"), ("to", "str", "ISO")],
    ),
    (
        "ecommerce",
        "apply_coupon_to_cart",
        "Apply a discount code to a shopping cart.",
        [("cart_id", "str", "cart"), ("code", "str", "coupon code")],
    ),
    (
        "ecommerce",
        "cancel_order",
        "Cancel an order that has not shipped yet.",
        [("order_id", "str", "order")],
    ),
    (
        "marketing",
        "send_newsletter",
        "Send a newsletter issue to its audience now.",
        [("newsletter_id", "str", "issue")],
    ),
    (
        "projects",
        "assign_task",
        "Assign a task to a team member.",
        [("task_id", "str", "task"), ("assignee", "str", "person")],
    ),
    (
        "iot",
        "reboot_device",
        "Power-cycle a connected device remotely.",
        [("device_id", "str", "device")],
    ),
    (
        "iot",
        "read_sensor_value",
        "Return the latest reading of a device sensor.",
        [("device_id", "str", "device"), ("sensor", "temperature/humidity/power", "which sensor")],
    ),
    (
        "healthcare",
        "schedule_visit",
        "Book a clinic visit for a patient.",
        [("patient_id", "str", "patient"), ("date", "str", "day")],
    ),
    (
        "education",
        "submit_assignment",
        "Submit a student's work for an assignment.",
        [("assignment_id", "str", "assignment"), ("student_id", "str", "student")],
    ),
    (
        "social",
        "schedule_post",
        "Queue a social post to publish at a given time.",
        [("text", "str", "post text"), ("publish_at", "str", "time")],
    ),
    (
        "finance",
        "approve_expense",
        "Approve a submitted expense claim for reimbursement.",
        [("expense_id", "str", "claim")],
    ),
    (
        "finance",
        "close_books",
        "Close the accounting period so no more entries post to it.",
        [("period", "str", "YYYY-MM")],
    ),
]

# Hand-written hard queries: (query, relevant tool names).
HARD_QUERIES: list[tuple[str, list[str]]] = [
    ("give the customer their money back for that charge", ["refund_payment"]),
    ("nudge the client about the unpaid bill", ["send_invoice_reminder"]),
    ("squash and land PR 812", ["merge_pull_request"]),
    ("get someone to look over my pull request", ["request_code_review"]),
    ("where is my parcel right now", ["track_shipment"]),
    ("how much would postage cost to send 3kg to Spain", ["quote_shipping_rate"]),
    ("we are running low on SKU AB-12, order more from the vendor", ["reorder_stock"]),
    ("how many units of sku X9 are available", ["count_stock_on_hand"]),
    ("when can all four of us meet for an hour", ["find_free_slot"]),
    ("write an email to bob@example.com", ["send_email"]),
    ("pass this mail along to legal", ["forward_message"]),
    ("OK Jane's vacation request", ["approve_leave_request"]),
    ("pay everyone for March", ["run_payroll"]),
    ("download the revenue dashboard as a spreadsheet", ["export_dashboard_csv"]),
    ("this complaint needs tier 2 attention", ["escalate_ticket"]),
    ("give ticket 55 to maria", ["assign_ticket"]),
    ("the last release broke prod, revert it", ["rollback_deployment"]),
    ("reboot web-3", ["restart_server"]),
    ("stop paging me about the outage, I'm on it", ["acknowledge_incident"]),
    ("bring the database back from last night's snapshot", ["restore_backup"]),
    ("say hello in the #general room", ["post_chat_message"]),
    ("add dave to the release channel", ["invite_to_channel"]),
    ("our access key leaked, replace it", ["rotate_api_key"]),
    ("user forgot their password", ["reset_user_password"]),
    ("get the MSA signed by acme", ["send_for_signature"]),
    ("is BA117 delayed", ["check_flight_status"]),
    ("how many euros is 300 dollars", ["convert_currency"]),
    ("use promo SPRING10 on my basket", ["apply_coupon_to_cart"]),
    ("customer changed their mind about order 991 before it shipped", ["cancel_order"]),
    ("blast the monthly bulletin out", ["send_newsletter"]),
    ("hand this work item to priya", ["assign_task"]),
    ("power cycle thermostat 4", ["reboot_device"]),
    ("what's the temperature reading on sensor 12", ["read_sensor_value"]),
    ("book Mr Smith in at the clinic on Tuesday", ["schedule_visit"]),
    ("hand in my homework", ["submit_assignment"]),
    ("queue a linkedin update for 9am tomorrow", ["schedule_post", "create_scheduled_post"]),
    ("sign off on Tom's travel claim", ["approve_expense"]),
    ("lock the ledger for June", ["close_books"]),
    ("which prospects are still uncontacted", ["list_leads"]),
    ("spin up a new vm in the medium size", ["create_server"]),
    ("kill the sev1 outage record", ["delete_incident"]),
    ("who reported the bug", ["get_issue"]),
    ("cut version v2.3.0", ["create_release"]),
    ("invoices in gbp due next week", ["list_invoices"]),
    ("make a 20 percent off promo code", ["create_coupon"]),
]


def _field_schema(kind: str, description: str) -> dict[str, Any]:
    if "/" in kind:
        return {"type": "string", "enum": kind.split("/"), "description": description}
    json_type = {"str": "string", "int": "integer", "bool": "boolean"}[kind]
    return {"type": json_type, "description": description}


def _human(identifier: str) -> str:
    return identifier.replace("_", " ")


def _parse_entity(spec: str) -> dict[str, Any]:
    singular, plural, aliases, fields = spec.split("|")
    parsed_fields = []
    for field in fields.split(";"):
        name, kind, description = field.split(":", 2)
        parsed_fields.append((name, kind, description))
    return {
        "entity": singular,
        "plural": plural,
        "aliases": aliases.split(","),
        "fields": parsed_fields,
    }


def build_tools() -> list[dict[str, Any]]:
    """Every tool of the dataset, as JSON (name, description, domains, parameters)."""
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for domain, specs in DOMAINS.items():
        for spec in specs:
            entity = _parse_entity(spec)
            for action, (pattern, template, takes_id, takes_fields) in ACTIONS.items():
                name = pattern.format(entity=entity["entity"], plural=entity["plural"])
                if name in seen:
                    name = f"{domain}_{name}"
                seen.add(name)
                properties: dict[str, Any] = {}
                if takes_id:
                    properties[f"{entity['entity']}_id"] = {
                        "type": "string",
                        "description": f"Identifier of the {_human(entity['entity'])}.",
                    }
                if takes_fields:
                    for field, kind, description in entity["fields"]:
                        properties[field] = _field_schema(kind, description)
                if action == "list":
                    properties["limit"] = {"type": "integer", "description": "Page size."}
                description = template.format(
                    plural_h=_human(entity["plural"]),
                    entity_h=_human(entity["entity"]),
                    domain=domain,
                )
                description += f" A {_human(entity['entity'])} is a {entity['aliases'][0]}."
                tools.append(_tool(name, description, domain, properties, action, entity))
    for domain, name, description, params in SPECIALS:
        properties = {field: _field_schema(kind, text) for field, kind, text in params}
        tools.append(_tool(name, description, domain, properties, "special", None))
    return tools


def _tool(
    name: str,
    description: str,
    domain: str,
    properties: dict[str, Any],
    action: str,
    entity: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "domains": [domain],
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": sorted(properties),
            "additionalProperties": False,
        },
        "action": action,
        "entity": entity["entity"] if entity else None,
    }


def build_queries(tools: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Paraphrased, partial-word and hand-written queries with their relevant tools."""
    by_domain_entity = {
        (tool["domains"][0], tool["entity"], tool["action"]): tool["name"] for tool in tools
    }
    queries: list[dict[str, Any]] = []
    for domain, specs in DOMAINS.items():
        entities = [_parse_entity(spec) for spec in specs]
        for entity in entities:
            actions = rng.sample(sorted(ACTIONS), 2)
            for action in actions:
                alias = rng.choice(entity["aliases"])
                field = rng.choice(entity["fields"])[0]
                template = rng.choice(VERB_PARAPHRASES[action])
                text = template.format(
                    entity_q=alias,
                    plural_q=alias + ("es" if alias.endswith(("s", "x", "ch")) else "s"),
                    field_q=_human(field),
                )
                if rng.random() < 0.5:
                    text += f" in {domain}"
                name = by_domain_entity[(domain, entity["entity"], action)]
                queries.append({"query": text, "relevant": [name], "kind": "paraphrase"})
        entity = rng.choice(entities)
        action = rng.choice(sorted(ACTIONS))
        words = _human(entity["entity"]).split()
        partial = " ".join(word[: max(3, len(word) // 2 + 1)] for word in words)
        verb = {"list": "all", "get": "show", "create": "new", "update": "edit", "delete": "del"}
        name = by_domain_entity[(domain, entity["entity"], action)]
        queries.append(
            {"query": f"{verb[action]} {partial}", "relevant": [name], "kind": "partial"}
        )
    names = {tool["name"] for tool in tools}
    for text, relevant in HARD_QUERIES:
        missing = [name for name in relevant if name not in names]
        if missing:
            raise SystemExit(f"hard query {text!r} names unknown tools {missing}")
        queries.append({"query": text, "relevant": relevant, "kind": "hard"})
    return queries


def main() -> None:
    """Write both JSON files (stable key order, one item per line)."""
    rng = random.Random(SEED)
    tools = build_tools()
    queries = build_queries(tools, rng)
    for filename, items in (("toolbox_tools.json", tools), ("toolbox_queries.json", queries)):
        lines = ",\n".join(json.dumps(item, sort_keys=True) for item in items)
        (HERE / filename).write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    print(f"{len(tools)} tools, {len(queries)} queries")


if __name__ == "__main__":
    main()
