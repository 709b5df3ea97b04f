"""Groups: POSIX groups, their gid numbers and members; user-private groups follow their user."""
