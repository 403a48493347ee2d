"""The Playwright browser runner: snapshot script, browser client, the run loop, agent clients, run reports."""
