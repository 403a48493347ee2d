"""The MiniWoB++ evaluation: task pages, the harness, the scripted model, results, report, CLI."""
