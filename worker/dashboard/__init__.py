"""`evalstream dashboard`: a live web view of every run, downstream of the output topics.

- `views`: what each page shows, pure functions of a run's latest progress and summary;
- `board`: those latest records of the runs in memory (open ones and the recent closed ones),
  the `index` of the others, and the open pages to tell of a change; `lookup`: an older run's
  summary read back from the topic;
- `follow`: the progress and summaries topics read into the board;
- `listing`: which runs the runs page lists (labels, run id prefix, page);
- `markup`, `formats`, `charts`, `pages`, `compare_page`, `task_page`: the HTML, every untrusted
  string escaped;
- `live`: what each open page is sent when runs change;
- `server`: the aiohttp routes (HTML, JSON, server-sent events); `service`: the command.
"""
