"""The check helper the Python tests share. Standard library only, so a test that imports it runs
under /usr/bin/python3 whether torch is there or not.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from checks import check, finish

check() prints one result and remembers a failure; finish() prints the count and exits 1 when a
check failed (ctest reads the exit code)."""
import sys

failures = []


def check(name, ok, detail="", limit=900):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:limit]}"))
    if not ok:
        failures.append(name)
    return bool(ok)


def finish():
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
