"""docs/trainer.md's configuration table names every field of TrainConfig (s33 #11): a field added to the dataclass
without a line there fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from collapsewatch.trainer.config import TrainConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "trainer.md"


def test_the_configuration_table_names_every_trainconfig_field() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("| group | fields (defaults) |", 1)[1].split("\n\n", 1)[0]
    named = set()
    for row in table.splitlines()[1:]:
        group, fields = row.strip("|").split("|", 1)
        # `rollout.*` / `correction.*` rows name the sub-keys of one dict field, not fields
        sub = re.search(r"`(\w+)\.\*`", group)
        named |= {sub.group(1)} if sub else set(re.findall(r"(?:^|,)\s*`(\w+)` \(", fields))
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert sorted(fields - named) == [], "docs/trainer.md, Configuration: fields with no line"
    assert sorted(named - fields) == [], "docs/trainer.md, Configuration: names no TrainConfig field"
