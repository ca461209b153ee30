// Translation unit that owns the precompiled header.
