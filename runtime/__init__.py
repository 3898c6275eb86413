"""flowc's lean runtime: loads compiled artifacts and runs them. Never imports the compiler."""
from runtime.artifact import Artifact, load_artifact
from runtime.dtypes import DType, as_dtype
from runtime.errors import ArtifactError, FeedError, FlowcError, RuntimeExecutionError
