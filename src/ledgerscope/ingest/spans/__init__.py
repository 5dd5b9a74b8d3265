"""OpenInference spans (Phoenix's export, OTLP JSON) onto the staged trace shape.

``requests`` groups spans into the requests a pipeline ran (by the span naming the question),
``spanmap`` maps one request's spans (LangChain's and LlamaIndex's shapes), ``openinference``
reads the files and ties the two together.
"""
