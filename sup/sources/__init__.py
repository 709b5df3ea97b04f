"""Where people and groups come from besides the API and SCIM (which lives in sup/scim): the Keycloak
pull (keycloak/), and bulk writers: file import and export (CSV, YAML, JSON) and adoption of what an
existing cluster already holds (LDAP, Slurm accounting)."""
