"""Pure rules: no I/O, no database, no HTTP. Everything here is unit-testable in isolation."""
