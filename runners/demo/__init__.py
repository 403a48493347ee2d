"""`veriloop demo`: the bundled patient-records app, its loopback server, the scripted playbook, the run."""
