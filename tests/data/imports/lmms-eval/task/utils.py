# Video-MME's own text and scoring functions from the installed lmms-eval; only the media are left out (no video
# files here, the dummy model reads none).
from lmms_eval.tasks.videomme.utils import (  # noqa: F401
    videomme_aggregate_results,
    videomme_doc_to_text,
    videomme_process_results,
)


def no_visual(doc):
    return []
