"""The web console served by ``veriloop serve`` and the HTML reports: one Jinja2 renderer
(:mod:`.render`), its templates and static files, and the console's routes (:mod:`.routes`)."""
