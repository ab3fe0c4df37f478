"""Command-line interface: one small module per subcommand, wired together in `main`."""
