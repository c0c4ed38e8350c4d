#!/usr/bin/env python3
"""docs/cli.md's feature table says what `loupe check` probes: same names, same order, same
categories and descriptions (both come from the feature table in core/src/kernel/features.cpp;
this keeps the docs from drifting). Usage: features_doc_test.py LOUPE DOCS_CLI_MD"""
import json
import re
import subprocess
import sys

loupe, doc = sys.argv[1], sys.argv[2]
out = subprocess.run([loupe, "check", "--json"], capture_output=True, text=True, check=False)
features = json.loads(out.stdout)["features"]
probed = [(f["name"], f["category"], f["description"]) for f in features]
text = open(doc, encoding="utf-8").read()
section = text.split("## Kernel features", 1)[-1].split("\n## ", 1)[0]
rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (.*) \|$", section, re.M)
if rows != probed:
    for want, have in zip(probed + [None] * len(rows), rows + [None] * len(probed)):
        if want != have:
            print(f"loupe check: {want}\ndocs/cli.md: {have}")
            break
    print(f"docs/cli.md lists {len(rows)} features, loupe check {len(probed)}: regenerate the "
          "table from `loupe check --json`")
    sys.exit(1)
print(f"{len(rows)} features, docs and preflight agree")
