"""Planning and applying changes across targets."""
