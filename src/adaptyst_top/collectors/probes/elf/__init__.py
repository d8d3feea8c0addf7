"""What is read from ELF files: symbols, debug files (debuginfod), FDEs, ifuncs, USDT notes."""
