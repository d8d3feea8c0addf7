"""Terminal interface and command line of adaptyst-top."""
