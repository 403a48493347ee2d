"""A large patients page of numbered links, for the page-work tests (tests/graph is on sys.path)."""


def big_page(rows: int = 400) -> str:
    """A table of ``rows`` patient links (ids 100 + row), a form, and a hidden button."""
    body = "".join(
        f'<tr><td>Patient {i}</td><td><a href="/patients/{i}" data-veriloop-id="{100 + i}">Open {i}</a></td></tr>'
        for i in range(rows)
    )
    return (
        "<html><head><script>var secret = 'do not show';</script><style>td{}</style></head><body>"
        '<button data-veriloop-id="4" class="btn btn-primary" onclick="go()">New patient</button>'
        f"<table>{body}</table>"
        '<form><input id="name" data-veriloop-id="5" placeholder="Full name" style="x">'
        '<button data-veriloop-id="7">Save record</button></form>'
        '<div data-veriloop-hidden="1"><button data-veriloop-id="9">Hidden delete</button></div>'
        "</body></html>"
    )
