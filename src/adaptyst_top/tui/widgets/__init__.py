"""Widgets of the monitor."""
