"""What keeps a probe from changing its target: entry classes, the entry check, confinement."""
