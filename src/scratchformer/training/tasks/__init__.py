"""One Task per job the trainer learns (base.py says what a Task is): the registry `--task` chooses from.

    translate  tasks/translate.py   pairs -> encoder-decoder (the paper)
    lm         tasks/lm.py          text -> decoder-only (GPT-like)
    mlm        tasks/mlm.py         text -> encoder + masked-LM head (BERT pre-training)
    classify   tasks/classify.py    text<TAB>label -> encoder + classification head
"""

from scratchformer.training.tasks.base import Task
from scratchformer.training.tasks.classify import ClassificationTask, classification_loss
from scratchformer.training.tasks.lm import LanguageModelTask
from scratchformer.training.tasks.mlm import MaskedLMTask, mlm_logits_and_loss
from scratchformer.training.tasks.translate import TranslationTask

TASKS: dict[str, type[Task]] = {t.name: t for t in (TranslationTask, LanguageModelTask, MaskedLMTask,
                                                    ClassificationTask)}

__all__ = ["TASKS", "ClassificationTask", "LanguageModelTask", "MaskedLMTask", "Task", "TranslationTask",
           "classification_loss", "mlm_logits_and_loss"]
