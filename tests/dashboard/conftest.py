import pytest

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.retrieval.pipeline import PipelineConfig


@pytest.fixture(scope="module")
def results_home(tmp_path_factory):
    """Small real results: LoCoMo's first two conversations, hashing encoder, lexical test reranker."""
    home = tmp_path_factory.mktemp("dash_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    summary = RIFExperiment(dataset="locomo", conversations=2, reranker="test:lexical", seeds=2, ks=(10, 30), burn_in=1000,
                            pipeline=PipelineConfig(encoder="test:hash"), progress=False).run()
    yield home, summary
    mp.undo()
