/* The API reference (/api/docs): a Swagger UI plugin that gives the page what axe asks of every page of ours.
   It goes through Swagger UI's plugin API (components and wrapComponents), so React draws it on every redraw:
   - an operation's summary is one button with its path a link inside it (nested-interactive): the path is
     plain text; the address still follows the open operation (deepLinking) and a shared one opens it;
   - the title and the Authorize button sit in landmarks (region; Swagger UI draws the operations' main),
     and hidden h2s keep the headings in order between the title's h1 and the groups' and dialog's h3s;
   - controls Swagger UI leaves without a name get one.
   SPECTACULAR_SETTINGS["SWAGGER_UI_SETTINGS"] lists it among the presets. */
window.ApiDocsAccessible = function ApiDocsAccessible(system) {
  var h = system.React.createElement;

  function hiddenHeading(text) {
    return h("h2", { className: "api-docs-visually-hidden" }, text);
  }

  /* A landmark named `label`; with `heading`, also an h2 saying it (for what comes after it). */
  function inRegion(label, heading) {
    return function (Original) {
      return function (props) {
        return h("section", { "aria-label": label }, heading ? hiddenHeading(label) : null, h(Original, props));
      };
    };
  }

  /* Names the element at `selector` that Swagger UI draws without a name, once drawn (React leaves alone an
     attribute it does not manage). nameOf(props) gives the name. */
  function naming(selector, nameOf) {
    return function (Original) {
      return function (props) {
        var name = nameOf(props);
        function label(node) {
          var target = node && node.querySelector(selector);
          if (target) target.setAttribute("aria-label", name);
        }
        return h("div", { ref: label }, h(Original, props));
      };
    };
  }

  return {
    components: {
      DeepLink: function (props) {
        return h("span", null, props.text);
      },
    },
    wrapComponents: {
      InfoContainer: inRegion("About this API", false),
      AuthorizeBtnContainer: inRegion("Authorization", true),
      operations: function (Original) {
        return function (props) {
          return h(system.React.Fragment, null, hiddenHeading("Operations"), h(Original, props));
        };
      },
      /* Each operation's responses table is a live region, all of them with the same (no) name. */
      responses: naming("table.responses-table", function (props) {
        return "Responses of " + String(props.method || "").toUpperCase() + " " + (props.path || "");
      }),
      authorizationPopup: naming("button.close-modal", function () {
        return "Close";
      }),
      /* "Try it out"'s request body editor. */
      TextArea: function (Original) {
        return function (props) {
          var body = /\bbody-param__text\b/.test(props.className || "") && !props["aria-label"];
          return h(Original, body ? Object.assign({ "aria-label": "Request body" }, props) : props);
        };
      },
      /* An open schema's toggle of its properties, drawn with no text when the schema has no title. */
      ModelCollapse: function (Original) {
        return function (props) {
          var title = props.title || h("span", { className: "api-docs-visually-hidden" }, "Properties");
          return h(Original, Object.assign({}, props, { title: title }));
        };
      },
    },
  };
};
