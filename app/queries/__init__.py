"""SQL by resource: plain functions taking the connection first, bound parameters only."""
