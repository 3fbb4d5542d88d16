#!/usr/bin/env python3
"""Write the JSON schema of the chart's ``pipelineSpec`` into values.schema.json, generated from
the spec compiler's own step table (``app.pipeline.spec.STEP_COMPILERS``: its step names, and
``STEP_FORMS``: how each is written), so that the chart and the compiler cannot drift: a spec
with a step the bridge does not know (``filtr``) fails ``helm template``, naming the step.

    tools/pipeline_schema.py            # rewrite values.schema.json's pipelineSpec
    tools/pipeline_schema.py --check    # exit 1 when the checked-in schema is not the generated one

The schema checks the spec's shape (a ``steps`` list of one-key mappings or bare step names,
each a known step); the compiler itself checks each step's options (``check-config``, or the
pod at start, exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "deploy" / "helm" / "eos-bridge" / "values.schema.json"
DESCRIPTION = (
    "Declarative pipeline spec, mounted from the ConfigMap as BRIDGE_PIPELINE_SPEC; empty means"
    " none. Its steps are checked at render time against the bridge's step table"
    " (tools/pipeline_schema.py); their options when the bridge starts."
)


def pipeline_spec_schema() -> dict[str, Any]:
    """The ``pipelineSpec`` schema from the compiler's step table."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from app.pipeline.spec import STEP_COMPILERS, STEP_FORMS

    names = sorted(STEP_COMPILERS)
    steps = {name: {"description": f"e.g. `{STEP_FORMS.get(name, '- ' + name)}`"} for name in names}
    return {
        "type": "object",
        "description": DESCRIPTION,
        "properties": {
            "steps": {
                "type": "array",
                "description": (
                    "The declarative pipeline's steps in order (mounted from the ConfigMap as"
                    " BRIDGE_PIPELINE_SPEC; empty pipelineSpec: none), each a one-key mapping or"
                    " a bare step name, checked at render time against the bridge's step table"
                    " (tools/pipeline_schema.py); their options when the bridge starts."
                ),
                "items": {
                    "description": 'One step: `- count`, or `- filter: "amount > 0"`.',
                    "anyOf": [
                        {"type": "string", "enum": names},
                        {
                            "type": "object",
                            "minProperties": 1,
                            "maxProperties": 1,
                            "properties": steps,
                            "additionalProperties": False,
                        },
                    ],
                },
            }
        },
        "additionalProperties": False,
    }


def generated(schema_text: str) -> str:
    """``schema_text`` (values.schema.json) with its ``pipelineSpec`` generated."""
    schema = json.loads(schema_text)
    schema["properties"]["pipelineSpec"] = pipeline_spec_schema()
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare, exit 1 on a drift")
    parser.add_argument("--schema", type=Path, default=SCHEMA, help="values.schema.json")
    args = parser.parse_args(argv)
    text = args.schema.read_text()
    new = generated(text)
    if args.check:
        if new != text:
            print(
                f"{args.schema}: pipelineSpec is not the generated schema; run "
                "tools/pipeline_schema.py (then tools/chart_readme.py)",
                file=sys.stderr,
            )
            return 1
        return 0
    args.schema.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
