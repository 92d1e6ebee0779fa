"""`evalstream dashboard`: a live web view of every run, downstream of the output topics.

- `views`: what each page shows, pure functions of a run's latest progress and summary;
- `board`: those latest records per run, and the open pages to tell of a change;
- `follow`: the progress and summaries topics read into the board;
- `markup`, `formats`, `charts`, `pages`, `compare_page`: the HTML, every untrusted string escaped;
- `live`: what each open page is sent when runs change;
- `server`: the aiohttp routes (HTML, JSON, server-sent events); `service`: the command.
"""
