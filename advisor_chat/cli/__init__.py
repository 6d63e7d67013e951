"""Command-line interface (thin shell over the library; the only place that maps errors to exit codes)."""
