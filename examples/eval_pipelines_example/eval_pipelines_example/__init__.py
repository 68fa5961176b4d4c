"""An example plug-in package for eval_pipelines (see docs/plugins.md): the classifier
``most-similar`` and the extract node type ``first-line``, declared as entry points in this
package's pyproject.toml."""
