"""SQLite and PostgreSQL fixtures (placeholder until the SQL store lands)."""
