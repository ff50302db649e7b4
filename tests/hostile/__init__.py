"""Hostile input: tables of inputs an attacker or a careless edit could send, each refused
with an error that names what is wrong, and the process still serving afterwards."""
