"""Prints docs/reference/python.md: every public name of the leanseq module (its __all__), with
its signature and docstring, and each class's methods and attributes. Run by generate.sh."""
import inspect

import leanseq


def doc_of(obj):
    return inspect.cleandoc(obj.__doc__ or "").strip()


def signature(name, obj):
    """name(args) -> result: from inspect, or from the first docstring line pybind11 writes."""
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        first = doc_of(obj).splitlines()[0] if doc_of(obj) else ""
        return first if first.startswith(name.split(".")[-1] + "(") else f"{name}(...)"


def body(obj):
    """The docstring without pybind11's signature line (the heading shows it)."""
    text = doc_of(obj)
    lines = text.splitlines()
    if lines and "(" in lines[0] and "->" in lines[0] and not lines[0].endswith("."):
        lines = lines[1:]
    return "\n".join(lines).strip()


def emit(text):
    if text:
        print(text.replace("``", "`"))
        print()


print("# Python API reference")
print()
print("Generated from the docstrings of the `leanseq` module (scripts/reference/generate.sh);")
print("[python.md](../python.md) is the guide. `import leanseq` loads the same runtime as the")
print(f"`leanseq` command (this page: version {leanseq.__version__}).")
print()
emit(body(leanseq))
for name in leanseq.__all__:
    obj = getattr(leanseq, name)
    if name == "__version__":
        print("## `__version__`\n\nThe version, as `leanseq --version` prints it.\n")
        continue
    if inspect.isclass(obj):
        print(f"## class `{name}`")
        print()
        emit(body(obj))
        for attr, member in obj.__dict__.items():
            if attr.startswith("_") and attr != "__init__":
                continue
            if isinstance(member, property) or type(member).__name__ == "property":
                print(f"- `{attr}`: {body(member).replace('``', '`') or '(undocumented)'}")
        print()
        for attr, member in obj.__dict__.items():
            if (attr.startswith("_") and attr != "__init__") or isinstance(member, property):
                continue
            if callable(member) and not doc_of(member).startswith("Initialize self."):
                print(f"### `{signature(name + '.' + attr, member)}`")
                print()
                emit(body(member))
    else:
        print(f"## `{signature(name, obj)}`")
        print()
        emit(body(obj))
