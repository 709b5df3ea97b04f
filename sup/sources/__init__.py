"""Where people and groups come from besides the API and SCIM (which lives in sup/scim), one package
per source, independent of each other: the Keycloak pull with its HTTP trigger (keycloak/), and the
file source (files/): import and export (CSV, YAML, JSON) and adoption of what an existing cluster
already holds (LDAP, Slurm accounting)."""
