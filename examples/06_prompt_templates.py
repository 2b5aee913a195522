"""06 - Prompt templates: instructions and settings kept in Markdown files.

Shows templates with YAML front matter (``description``, ``temperature``, ``parameters``) and a Jinja2 body,
``template_path`` pointing at their folder, build-time context (the company and its policies) and run-time
parameters (the customer and their order), for a small e-commerce desk: a triage robot picks the
specialist, and the specialist answers with the customer's data in its instructions.

The templates are written to a temporary folder, so the example leaves nothing behind.

Run it: ``python examples/06_prompt_templates.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _offline import llm

import robotlab

TEMPLATES = {
    "triage.md": """---
description: Sorts customer requests
temperature: 0.0
---
You triage requests for {{ company }}. Answer with one word: orders or products.
""",
    "orders.md": """---
description: Answers questions about orders
temperature: 0.3
parameters:
  company: null
  return_days: 30
  customer: null
  order: null
---
You are the order desk of {{ company }}. Returns are accepted within {{ return_days }} days.
The customer is {{ customer.name }} ({{ customer.tier }} member).
Their latest order: {{ order.id }}, {{ order.item }}, status {{ order.status }}.
""",
    "products.md": """---
description: Answers questions about products
temperature: 0.7
parameters:
  company: null
---
You are the product expert of {{ company }}. Recommend at most two products.
""",
}

prompts = Path(tempfile.mkdtemp(prefix="robotlab_prompts_"))
for name, body in TEMPLATES.items():
    (prompts / name).write_text(body)
robotlab.configure(template_path=str(prompts))

shop = {"company": "Acme Outdoor"}  # build-time context, shared by every robot
triage = robotlab.build(name="triage", template="triage", context=shop, llm=llm("orders", "products"))
desks = {
    "orders": robotlab.build(name="orders", template="orders", context=shop,
                             llm=llm("Hi Ada! Order A-1001 (the trail tent) shipped yesterday.")),
    "products": robotlab.build(name="products", template="products", context=shop,
                               llm=llm("For winter hiking I'd pick the Summit boots and merino socks.")),
}
print(f"orders desk before any run: description={desks['orders'].description!r}, "
      f"instructions={desks['orders'].instructions!r} (customer and order are not known yet)")

customer = {"name": "Ada", "tier": "gold"}
order = {"id": "A-1001", "item": "trail tent", "status": "shipped"}

for request in ("Where is my tent?", "What boots do you recommend for winter hiking?"):
    desk_name = str(triage.run(request).reply).strip().lower().strip(".")
    desk = desks.get(desk_name, desks["products"])
    result = desk.run(request, customer=customer, order=order) if desk is desks["orders"] else desk.run(request)
    print(f"customer: {request}")
    print(f"  triage -> {desk.name} (temperature {desk.effective_config.get('temperature')})")
    print(f"  instructions: {' '.join(str(desk.instructions).split())}")
    print(f"  {desk.name}: {result.reply}")
