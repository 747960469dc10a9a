"""The rules digest counts a rule module's code, not its docstrings or comments (collapsewatch/detectors/rules.py)."""

from collapsewatch.detectors import DetectorConfig
from collapsewatch.detectors.rules import code_text, rules_digest

RULE = '''"""Module doc."""
def f(x):
    """Function doc."""
    return x > 0.5  # a comment
'''


def test_docstrings_and_comments_leave_the_code_text_unchanged():
    # the same rule with other docs, another comment and other blank lines: one code text
    edited = '"""Other doc."""\n\n\ndef f(x):\n    """Another."""\n    # why\n    return x > 0.5\n'
    assert code_text(edited) == code_text(RULE)


def test_a_changed_rule_changes_the_code_text():
    # the threshold 0.5 -> 0.6 is a different rule; so is a function left with no docstring but a new body
    assert code_text(RULE.replace("0.5", "0.6")) != code_text(RULE)
    assert code_text('def f(x):\n    return x > 0.5\n') == code_text(RULE.replace('"""Module doc."""\n', ""))
    assert code_text('def f(x):\n    "doc"\n') != code_text('def f(x):\n    return 1\n')


def test_the_digest_follows_the_settings():
    # same settings, same digest; one setting changed, another digest (12 hex digits each)
    a, b = rules_digest(), rules_digest(DetectorConfig())
    assert a == b and len(a) == 12 and int(a, 16) >= 0
    fields = DetectorConfig.__dataclass_fields__
    name = next(n for n, f in fields.items() if isinstance(getattr(DetectorConfig(), n), (int, float))
                and not isinstance(getattr(DetectorConfig(), n), bool))
    from dataclasses import replace
    changed = replace(DetectorConfig(), **{name: getattr(DetectorConfig(), name) + 1})
    assert rules_digest(changed) != a


def test_the_code_digest_is_kept_by_the_modules_bytes_and_recomputed_when_its_file_is_bad(tmp_path, monkeypatch):
    from collapsewatch.detectors import rules

    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path))
    rules.code_digest.cache_clear()
    try:
        fresh = rules.code_digest()
        kept = list((tmp_path / "rules").iterdir())
        assert len(kept) == 1 and kept[0].read_text() == fresh  # written under the sha1 of the modules' bytes
        # the kept value is what a later process reads: plant another 40-hex value and it is returned
        kept[0].write_text("0" * 40)
        rules.code_digest.cache_clear()
        assert rules.code_digest() == "0" * 40
        # a damaged file is not a digest: computed afresh (the same as the first time) and written again
        kept[0].write_text("not a digest")
        rules.code_digest.cache_clear()
        assert rules.code_digest() == fresh and kept[0].read_text() == fresh
    finally:
        rules.code_digest.cache_clear()
        rules._digest.cache_clear()
        rules._default_digest.cache_clear()


def test_the_default_digest_is_the_built_in_settings_digest():
    from collapsewatch.detectors.config import DetectorConfig

    assert rules_digest() == rules_digest(DetectorConfig())
