"""Importers: other harnesses' results on disk, read as v1 input events.

Each source module (`harbor`, `inspect_log`, `nemo`) has one entry point,
`read(path, options) -> Iterator[InputEvent]`, that yields a whole event log in log order.
They read the formats with plain JSON and the standard library (plus what a format
needs), never with the harnesses' own packages. Event ids are derived from the source
(`source.event_id`), so importing the same results twice is a harmless redelivery.
"""
