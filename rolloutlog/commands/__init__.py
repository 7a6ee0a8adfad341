"""CLI commands that combine a driver with replay's reports (drivers and replay meet here)."""
