"""Observers: the federation watched at 10 Hz onto one timeline."""
