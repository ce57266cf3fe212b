"""From a collected session to a validated plan and the facts every decision is made from."""
