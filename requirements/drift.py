"""What the newest allowed versions change against a lock: `pip freeze | python3 drift.py requirements/main.txt`.

Prints one line per package whose version differs (lock → installed), and the packages only one side has;
`make test-latest` prints it before running the suite, so its result names what upstream changed.
"""

import re
import sys


def pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def main() -> None:
    with open(sys.argv[1]) as f:
        locked = pins(f.readlines())
    installed = pins(sys.stdin.readlines())
    changed = [f"  {n}: {locked[n]} -> {installed[n]}" for n in sorted(locked.keys() & installed.keys())
               if locked[n] != installed[n]]
    new = [f"  {n}: (not locked) -> {installed[n]}" for n in sorted(installed.keys() - locked.keys())]
    gone = [f"  {n}: {locked[n]} -> (not installed)" for n in sorted(locked.keys() - installed.keys())]
    lines = changed + new + gone
    print(f"newest allowed vs {sys.argv[1]}: {len(changed)} changed, {len(new)} new, {len(gone)} not installed")
    print("\n".join(lines) if lines else "  (identical)")


if __name__ == "__main__":
    main()
