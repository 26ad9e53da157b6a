"""Converters for audio-visual ("omni") multiple-choice releases into ``spectrum`` benchmark folders
(docs/benchmarks.md, "Omni benchmarks"): one module per release, each reading the release as it ships and turning
every question into an ``Entry`` (``common``); ``common.write_release`` then links the media, skips answerless
splits, validates each item and writes the folder.

========================  ==============================  ===============================================
release                   module                          media of an item
========================  ==============================  ===============================================
Daily-Omni                ``daily_omni``                  video and audio, two files per clip
WorldSense                ``worldsense``                  one mp4 as video and as audio (its soundtrack)
Video-MME (with audio)    ``videomme``                    one mp4 as video and as audio (its soundtrack)
OmniBench                 ``omnibench``                   image and audio
========================  ==============================  ===============================================

Adding a release: a module with a ``convert_<release>`` function that reads the release's question file(s) with
``common.read_json`` / ``read_jsonl`` / ``parquet_rows``, builds one ``Entry`` per question with ``field_text``,
``option_texts`` and ``answer_label`` (errors name file, entry and field through ``Where``), names its media by the
relative paths the release uses (``MediaRef``; bytes embedded in a Parquet cell also work) and any text stand-in
the release gives per modality (``Entry.text_alternatives``), and passes the entries to ``write_release``; then a
name in ``output_folder.CONVERTERS`` and a command in ``cli.py`` (``OMNI_RELEASES``). Audio-only releases (MMAU,
MMAR) are entries with ``media={"audio": ...}`` and answers given as option texts; per-question labels a release
adds (OmniVideoBench's evidence modality, a duration) go to ``category`` / ``task`` or become a filter of the command.
Several media of one kind per question (AV-Odyssey's several images or clips) need a ``spectrum`` item that takes
more than one file per modality: ``Entry.media`` holds one ``MediaRef`` per modality until it does.
"""
