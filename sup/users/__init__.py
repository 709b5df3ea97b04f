"""Users: POSIX accounts of people, their SSH keys and group memberships."""
