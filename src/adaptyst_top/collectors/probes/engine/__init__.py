"""The probe engine: building, attaching, reading and following processes."""
