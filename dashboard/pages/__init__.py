"""Dashboard pages, one module each (registered with ``dash.register_page`` when imported by ``app``)."""
