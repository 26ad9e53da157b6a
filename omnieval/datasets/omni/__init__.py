"""Converters for audio-visual ("omni") and audio multiple-choice releases into ``spectrum`` benchmark folders
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
MMAU                      ``mmau``                        audio (the version read is recorded)
MMAU-Pro                  ``mmau_pro``                    audio clip(s) (``data.zip`` read in place); open
                                                          items for its ``open`` questions
MMAR                      ``mmar``                        audio
AV-Odyssey                ``av_odyssey``                  image(s) or video, and audio clip(s): one benchmark
OmniVideoBench            ``omnivideobench``              one mp4 as video and as audio, evidence labels
VoiceBench                ``voicebench``                  audio: the spoken question (embedded), its text;
                                                          open items (no options) for its open subsets
MMSU                      ``mmsu``                        audio (embedded, or under ``audio/``)
JointAVBench              ``jointavbench``                the user's ``<qid>.mp4`` as video and as audio
Video-MME-v2              ``videomme_v2``                 one mp4 as video and as audio, groups of four
Video-Holmes              ``video_holmes``                one mp4 as video and as audio, question types
========================  ==============================  ===============================================

Adding a release: a module with a ``convert_<release>`` function that reads the release's question file(s) with
``common.read_json`` / ``read_jsonl`` / ``parquet_rows``, builds one ``Entry`` per question with ``field_text``,
``option_texts`` and ``answer_label`` (errors name file, entry and field through ``Where``), names its media by the
relative paths the release uses (``MediaRef``; bytes embedded in a Parquet cell also work), any text stand-in the
release gives per modality (``Entry.text_alternatives``) and any label of where the answer's evidence lies
(``Entry.evidence_modality``) and the release's own score breakdowns (``Entry.breakdowns``), builds them with
``sound_entries`` so that an entry that cannot be converted is skipped and listed rather than refusing the release,
and passes the entries to ``write_release`` (``skip_unsound=True``); then a name in
``output_folder.CONVERTERS`` and a command in ``cli.py`` (``OMNI_RELEASES``). A ``spectrum`` item may show several
files of one modality (a list of ``MediaRef``), and the items of one benchmark may differ in their modalities: each
gets the conditions its own modalities allow (AV-Odyssey has both).
"""

MMAU_VERSIONS: tuple[str, ...] = ("original", "v05.15.25")
"""The MMAU versions ``mmau`` knows (its ``REVISIONS``); here so the command line can list them without importing
the converter."""
