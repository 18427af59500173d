"""The local web explorer (``dobutsu-tb serve``): a JSON API over one tablebase file and the page.

- :mod:`~dobutsu_tb.analysis.web.service`: the open tablebase, used from one worker thread, and
  the file's statistics, counted once in a child process;
- :mod:`~dobutsu_tb.analysis.web.app`: the Starlette application (routes, input limits, errors
  as JSON);
- :mod:`~dobutsu_tb.analysis.web.server`: listening on a socket with uvicorn;
- ``static/``: the page (HTML, CSS, JavaScript; no CDN, it works offline).
"""

from dobutsu_tb.analysis.web.app import create_app
from dobutsu_tb.analysis.web.server import listen, serve

__all__ = ["create_app", "listen", "serve"]
