"""Read-only reporting API for security-awareness programmes."""
