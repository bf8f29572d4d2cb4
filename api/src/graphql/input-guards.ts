import { BREAK, Kind, visit, type ASTNode, type DocumentNode, type GraphQLError } from 'graphql';
import { DomainError } from '#core/shared/errors';
import { findNul } from '../edge/nul-guard';
import { graphQLErrorForDomain } from './errors';

/**
 * PostgreSQL text cannot hold NUL (edge/nul-guard.ts): the refusal for GraphQL, over HTTP and
 * graphql-ws, before anything executes: every string literal of the document (arguments, input objects, JSON literals, variable defaults) and every
 * string or object key of the variables. Resolvers then never see a NUL whatever the argument.
 */
export function nulInOperation(
  document: DocumentNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): GraphQLError | null {
  const field = nulInLiterals(document) ?? prefixed(findNul(variables ?? {}, ''));
  if (field === null) return null;
  return graphQLErrorForDomain(
    new DomainError('validation_failed', 'Text may not contain NUL characters.', {
      errors: [{ field, message: 'contains a NUL character' }],
    }),
  );
}

function prefixed(path: string | null): string | null {
  return path === null ? null : `$${path}`;
}

/** Dotted path (field, argument, input fields) of the first literal holding U+0000, or null. */
function nulInLiterals(document: DocumentNode): string | null {
  let found: string | null = null;
  visit(document, {
    StringValue(node, _key, _parent, _path, ancestors) {
      if (!node.value.includes('\u0000')) return undefined;
      found = literalPath(ancestors) || '(document)';
      return BREAK;
    },
  });
  return found;
}

function literalPath(ancestors: ReadonlyArray<ASTNode | ReadonlyArray<ASTNode>>): string {
  const names: string[] = [];
  for (const ancestor of ancestors) {
    if (!('kind' in ancestor)) continue;
    switch (ancestor.kind) {
      case Kind.FIELD:
        names.push((ancestor.alias ?? ancestor.name).value);
        break;
      case Kind.ARGUMENT:
      case Kind.OBJECT_FIELD:
        names.push(ancestor.name.value);
        break;
      case Kind.VARIABLE_DEFINITION:
        names.push(`$${ancestor.variable.name.value}`);
        break;
      default:
        break;
    }
  }
  return names.join('.');
}
