from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice


@task
def video_mcq():
    samples = [
        Sample(id="q1", input="What colour is the car in the clip?", choices=["red", "blue", "green", "black"],
               target="A", metadata={"video_id": "vid-a"}),
        Sample(id="q2", input="How many people speak?", choices=["one", "two", "three", "four"],
               target="B", metadata={"video_id": "vid-a"}),
        Sample(id="q3", input="Which instrument is heard?", choices=["piano", "violin", "drums", "flute"],
               target="A", metadata={"video_id": "vid-b"}),
        Sample(id=4, input="Where does the scene take place?", choices=["kitchen", "street", "beach", "office"],
               target="C", metadata={"video_id": "vid-c"}),
    ]
    return Task(dataset=samples, solver=multiple_choice(), scorer=choice())
